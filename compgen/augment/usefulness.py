"""When an augmenter's output cannot help on the data, and why: GECA that synthesizes
nothing, CSL whose grammar derives none of the held-out pairs or whose samples only pair
training outputs with other inputs. Each reason is one line naming the figures behind it
and the `settings` that change it; the command line prints each as ``warning: ...``, the
Python API raises it as a ``UserWarning``."""

from __future__ import annotations

from collections.abc import Sequence

Pairs = Sequence[tuple[Sequence[str], Sequence[str]]]


def geca_reasons(stats: dict, wug_size: int) -> list[str]:
    """Why GECA wrote no example (none when it wrote some): the first stage that came out
    empty, from its statistics."""
    if stats.get("synthesized", 0) > 0:
        return []
    pairs = stats.get("training_examples", 0)
    if not stats.get("active_templates"):
        why = (f"no two of the {pairs:,} training examples share a template (no fragment of "
               f"at most {wug_size} tokens, `wug_size`, recurs in the same context), so "
               "nothing can be recombined")
    elif not stats.get("proposals"):
        why = (f"its {stats['active_templates']:,} usable templates share no environment with "
               "another, so no fragment moves")
    else:
        why = (f"every one of its {stats['proposals']:,} proposals has a training input or "
               "output already (examples must be new on both sides)")
    advice = ("Try another `preset` (semparse for question -> query data, scan for commands "
              "-> actions, lm for text) or a larger `wug_size`")
    return [f"GECA synthesized no example: {why}. {advice}"]


def csl_reasons(summary: dict, samples: Pairs, train: Pairs) -> list[str]:
    """Why CSL's samples will not help: a grammar that derives none of the held-out pairs,
    samples that all carry a training output."""
    reasons = []
    rules, pairs = summary.get("rules", 0), summary.get("train_pairs", len(train))
    memorizes = (f" ({rules:,} rules for {pairs:,} training pairs: nearly one a pair, the "
                 "grammar learnt the pairs, not their parts)" if rules >= pairs / 2 else "")
    held_out = {name: summary[f"{name}_coverage"] for name in ("dev", "test")
                if summary.get(f"{name}_pairs") and f"{name}_coverage" in summary}
    if held_out and all(share == 0 for share in held_out.values()):
        sets = " or ".join(f"{name} ({summary[f'{name}_pairs']:,})" for name in held_out)
        reasons.append(f"CSL's grammar derives none of the {sets} pairs{memorizes}: its "
                       "samples cannot teach what the held-out data asks")
        memorizes = ""   # said once
    if samples:
        outputs = {tuple(y) for _, y in train}
        seen = sum(tuple(y) in outputs for _, y in samples)
        if seen == len(samples):
            reasons.append(f"every one of CSL's {len(samples):,} samples has a training output "
                           f"(only its input is new){memorizes}: they add no new output")
    return reasons
