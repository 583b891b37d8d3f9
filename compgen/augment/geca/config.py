"""GECA options: the config dataclass, the presets in ``compgen/configs/geca_*.toml``, overrides."""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, fields
from importlib import resources

from compgen.configs import read_section
from compgen.data.task import task_of
from compgen.errors import SettingError, UserError, check_seed

PRESETS = ("scan", "lm", "lm-na", "semparse", "semparse-logic", "generic")


@dataclass
class GecaConfig:
    wug_limit: int | None = None
    wug_size: int = 4
    wug_count: int = 2
    variants: int | None = 2
    novel_variants: bool = False
    novel_tries: int | None = None
    n_sample: int | None = 1000
    max_comp_len: int | None = None
    dedup: bool = False
    output_only: bool = False
    template_sim: str = "none"
    sim_window_size: int = 2
    holdout: int = 0
    seed: int = 0
    reference_offsets: bool = True

    def validate(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise SettingError(msg)
        for f in fields(self):   # 2.5 examples or a seed 'x' are mistakes, not rounded
            value, kind = getattr(self, f.name), str(f.type)
            if value is None and kind.endswith("| None"):
                continue
            if kind.startswith("int"):
                need(isinstance(value, int) and not isinstance(value, bool),
                     f"`{f.name}` {value!r}: must be an integer")
            elif kind == "bool":
                need(isinstance(value, bool), f"`{f.name}` {value!r}: must be true or false")
            elif kind == "str":
                need(isinstance(value, str), f"`{f.name}` {value!r}: must be text")
        need(self.wug_size >= 1, f"`wug_size` must be >= 1 (got {self.wug_size})")
        need(self.wug_size <= 8, f"`wug_size` must be <= 8 (got {self.wug_size})")
        need(1 <= self.wug_count <= 3, f"`wug_count` must be 1, 2 or 3 (got {self.wug_count})")
        need(self.wug_limit is None or self.wug_limit >= 1,
             f"`wug_limit` must be >= 1 (got {self.wug_limit})")
        need(self.variants is None or self.variants >= 1,
             f"`variants` must be >= 1 or 'all' (got {self.variants})")
        need(self.novel_tries is None or self.novel_tries >= 1,
             f"`novel_tries` must be >= 1 or 'all' (got {self.novel_tries})")
        need(self.n_sample is None or self.n_sample >= 1,
             f"`n_sample` must be >= 1 (got {self.n_sample})")
        need(self.max_comp_len is None or self.max_comp_len >= 1,
             f"`max_comp_len` must be >= 1 (got {self.max_comp_len})")
        need(self.template_sim in ("none", "window"),
             f"`template_sim` must be 'none' or 'window' (got {self.template_sim!r})")
        need(0 <= self.sim_window_size <= 16,
             f"`sim_window_size` must be between 0 and 16 (got {self.sim_window_size})")
        need(self.holdout >= 0, f"`holdout` must be >= 0 (got {self.holdout})")
        need(self.seed >= 0, f"`seed` must be >= 0 (got {self.seed})")
        check_seed(self.seed)   # 2**64 + 5 is no seed 5


def load_preset(name: str) -> dict:
    """Option values of a preset (``compgen/configs/geca_<name>.toml``) as a dict."""
    if name not in PRESETS:
        raise UserError(f"unknown GECA preset '{name}' (valid: {', '.join(PRESETS)})")
    text = resources.files("compgen").joinpath(
        "configs", f"geca_{name.replace('-', '_')}.toml").read_text()
    values = tomllib.loads(text)
    known = sorted(f.name for f in fields(GecaConfig))
    for key, value in list(values.items()):
        if key not in known:
            raise UserError(f"geca_{name.replace('-', '_')}.toml: unknown option '{key}' "
                            f"(valid: {', '.join(known)})")
        if value == "all" or value == "none" and key != "template_sim":
            values[key] = None
    return values


SCAN_HOLDOUT = 640   # the reference's n_batch * 10 validation examples


def make_config(preset: str | None = None, overrides: dict | None = None,
                data: str | None = None, reference_split: bool | None = None) -> GecaConfig:
    """A config from a preset plus explicit overrides (None values are ignored). Without a
    preset, a data file or folder (anything but a named set) gets the generic preset and
    GeoQuery the paper's semparse one.

    ``reference_split`` None (auto) holds out the reference's 640 SCAN validation
    examples exactly when the scan preset runs on a named SCAN data set (``scan/...``);
    a file such as the reference's own training set is used as it is."""
    if preset is None and data is not None:
        preset = task_of(data).geca_preset()
    values = load_preset(preset) if preset else {}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if reference_split is None:
        reference_split = preset == "scan" and bool(data) and task_of(data).scan
    if reference_split:
        values.setdefault("holdout", SCAN_HOLDOUT)
    return read_section(GecaConfig, values, f"GECA preset {preset}" if preset else "GECA options")


def config_dict(cfg: GecaConfig) -> dict:
    return asdict(cfg)
