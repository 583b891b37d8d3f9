"""UNIFY(a, b): the rules c with a = b∘c (c plugged into an argument of b) or a = c∘b
(b plugged into an argument of c), rules read as string functions."""

from __future__ import annotations

from dataclasses import dataclass

from compgen.augment.csl.rules import Rule, canonical, is_nt, nt_index, nt_set, nt_token


@dataclass(frozen=True)
class UnifyConfig:
    allow_repeated_target_nts: bool = True
    allow_single_nt_target: bool = True
    max_num_nts: int = 2


def _substitutions(a: tuple[str, ...], b: tuple[str, ...], repeated: bool):
    """All ways to turn b into a by renaming b's NTs and replacing one NT of b by a
    non-empty token list: yields (substituted NT of b, its expansion, renaming)."""
    results = []
    # state: ia, ib, sub_lhs, sub_rhs (tuple), open (substitution still growing), renaming
    stack = [(0, 0, None, (), False, ())]
    while stack:
        ia, ib, sub_lhs, sub_rhs, is_open, subs = stack.pop()
        renaming = dict(subs)
        if ia == len(a) and ib == len(b):
            if sub_lhs is not None:
                results.append((sub_lhs, sub_rhs, renaming))
            continue
        if is_open and ia < len(a):  # extend the open substitution by a's next token
            stack.append((ia + 1, ib, sub_lhs, sub_rhs + (a[ia],), True, subs))
        if ia < len(a) and ib < len(b):
            ta, tb = a[ia], b[ib]
            # match the next tokens (closes an open substitution)
            if is_nt(tb) and tb != sub_lhs:
                if is_nt(ta):
                    mapped = renaming.get(tb)
                    if mapped == ta or (mapped is None and ta not in renaming.values()):
                        new = subs if mapped else tuple(sorted({**renaming, tb: ta}.items()))
                        stack.append((ia + 1, ib + 1, sub_lhs, sub_rhs, False, new))
                if sub_lhs is None and tb not in renaming:  # start substituting tb
                    stack.append((ia + 1, ib + 1, tb, (ta,), True, subs))
            elif not is_nt(tb) and ta == tb:
                stack.append((ia + 1, ib + 1, sub_lhs, sub_rhs, False, subs))
            elif repeated and tb == sub_lhs and a[ia:ia + len(sub_rhs)] == sub_rhs:
                stack.append((ia + len(sub_rhs), ib + 1, sub_lhs, sub_rhs, False, subs))
    verified = []
    for sub_lhs, sub_rhs, renaming in results:
        rebuilt: list[str] = []
        for token in b:
            if token == sub_lhs:
                rebuilt.extend(sub_rhs)
            else:
                rebuilt.append(renaming.get(token, token) if is_nt(token) else token)
        if tuple(rebuilt) == a:
            verified.append((sub_lhs, sub_rhs, renaming))
    return verified


def _plug_into_b(a: Rule, b: Rule, cfg: UnifyConfig) -> set[Rule]:
    """c such that a = b with one of b's NTs expanded by c."""
    if b.arity == 0:
        return set()
    out = set()
    sources = _substitutions(a.source, b.source, False)
    if not sources:
        return out
    targets = _substitutions(a.target, b.target, cfg.allow_repeated_target_nts)
    for s_lhs, s_rhs, s_map in sources:
        if len(s_rhs) == 1 and is_nt(s_rhs[0]):
            continue
        for t_lhs, t_rhs, t_map in targets:
            if t_lhs != s_lhs or t_map != s_map:
                continue
            if not cfg.allow_single_nt_target and len(t_rhs) == 1 and is_nt(t_rhs[0]):
                continue
            if nt_set(s_rhs) != nt_set(t_rhs):
                continue
            out.add(canonical(s_rhs, t_rhs))
    return out


def _matches_modulo_nts(window: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return all((is_nt(w) and is_nt(p)) or w == p for w, p in zip(window, pattern))


def _fresh(rest: list[str]) -> str:
    used = {nt_index(t) for t in rest if is_nt(t)}
    return nt_token(min(i for i in range(1, len(used) + 2) if i not in used))


def _count(seq: tuple[str, ...], window: tuple[str, ...]) -> int:
    n = len(window)
    return sum(1 for i in range(len(seq) - n + 1) if seq[i:i + n] == window)


def _source_holes(a: Rule, b: Rule, cfg: UnifyConfig):
    n = len(b.source)
    for start in range(len(a.source) - n + 1):
        window = a.source[start:start + n]
        if not _matches_modulo_nts(window, b.source) or _count(a.source, window) > 1:
            continue
        rest = list(a.source[:start]) + list(a.source[start + n:])
        fresh = _fresh(rest)
        c_source = a.source[:start] + (fresh,) + a.source[start + n:]
        if len(c_source) == 1 or len(nt_set(c_source)) > cfg.max_num_nts:
            continue
        yield window, c_source


def _target_holes(a: Rule, b: Rule, cfg: UnifyConfig):
    n = len(b.target)
    seq = a.target
    seen = set()
    for start in range(len(seq) - n + 1):
        window = seq[start:start + n]
        if window in seen or not _matches_modulo_nts(window, b.target):
            continue
        seen.add(window)
        if not cfg.allow_single_nt_target and len(window) == 1 and is_nt(window[0]):
            continue
        count = _count(seq, window)
        if count > 1 and not cfg.allow_repeated_target_nts:
            continue
        # replace every non-overlapping occurrence, left to right, by one fresh NT
        pieces: list[list[str] | None] = []
        i = replaced = 0
        while i < len(seq):
            if seq[i:i + n] == window:
                pieces.append(None)
                replaced += 1
                i += n
            else:
                pieces.append([seq[i]])
                i += 1
        if replaced != count:
            continue
        rest = [t for p in pieces if p is not None for t in p]
        fresh = _fresh(rest)
        c_target = tuple(fresh if p is None else p[0] for p in pieces)
        if not cfg.allow_single_nt_target and len(c_target) == 1:
            continue
        if len(nt_set(c_target)) > cfg.max_num_nts:
            continue
        yield window, c_target


def _b_into_c(a: Rule, b: Rule, cfg: UnifyConfig) -> set[Rule]:
    """c such that a = c with one of c's NTs expanded by b."""
    out = set()
    sources = list(_source_holes(a, b, cfg))
    if not sources:
        return out
    for s_window, c_source in sources:
        for t_window, c_target in _target_holes(a, b, cfg):
            if nt_set(c_source) != nt_set(c_target) or nt_set(s_window) != nt_set(t_window):
                continue
            if canonical(s_window, t_window) != b:
                continue
            out.add(canonical(c_source, c_target))
    return out


def unify(a: Rule, b: Rule, cfg: UnifyConfig) -> set[Rule]:
    """Rules c with a = b∘c or a = c∘b."""
    return _plug_into_b(a, b, cfg) | _b_into_c(a, b, cfg)
