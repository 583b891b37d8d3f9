"""A direct, slow transcription of GECA's definition (geca-spec.md §2-§6) over Python
tuples, used by the tests as the oracle for the vectorised implementation on small data.

It enumerates templates by the literal recursion (replace-all on the rewritten sequence,
second span searched from i+1 of the rewritten sequence), builds the template-template
adjacency explicitly and returns the SET of synthesized pairs with every candidate tried
(variants = all, no sample cap)."""

from __future__ import annotations

from collections import Counter, defaultdict

SEP, BOS, EOS = ("<SEP>",), ("<BOS>",), ("<EOS>",)   # tuples: never equal to a str token
WUGS = [("<WUG>", k) for k in range(8)]


def _replace_all(seq, span, token):
    out, i, n = [], 0, len(span)
    while i < len(seq):
        if tuple(seq[i:i + n]) == span:
            out.append(token)
            i += n
        else:
            out.append(seq[i])
            i += 1
    return tuple(out)


def _generic(seq, keep, begin, depth, used, wug_size, wug_count):
    for size in range(1, wug_size + 1):
        for i in range(begin, len(seq) + 1 - size):
            span = tuple(seq[i:i + size])
            if SEP in span or span not in keep:
                continue
            if any(set(span) & set(u) for u in used):
                continue
            templ = _replace_all(seq, span, WUGS[depth])
            args = used + (span,)
            yield templ, args
            if depth + 1 < wug_count:
                yield from _generic(templ, keep, i + 1, depth + 1, args, wug_size, wug_count)


def _signature(templ, w):
    idx = [i for i, t in enumerate(templ) if t in WUGS]
    return tuple(templ[max(0, i - w): i + w + 1] for i in idx)


def direct_geca(pairs, wug_size, wug_count, wug_limit=None, max_comp_len=None,
                template_sim="none", window=2, output_only=False):
    pairs = [(tuple(x), tuple(y)) for x, y in pairs]
    counts = Counter()
    for x, y in pairs:
        for side in (x, y):
            for n in range(1, wug_size + 1):
                for i in range(len(side) + 1 - n):
                    counts[side[i:i + n]] += 1
    keep = {g for g, c in counts.items() if wug_limit is None or c <= wug_limit}
    t_args, a_templs = defaultdict(set), defaultdict(set)
    for x, y in pairs:
        if max_comp_len is not None and len(x) + 1 + len(y) >= max_comp_len:
            continue
        seq = BOS + x + SEP + y + EOS
        for templ, args in _generic(seq, keep, 0, 0, (), wug_size, wug_count):
            t_args[templ].add(args)
            a_templs[args].add(templ)
    if template_sim == "window":
        by_sig = defaultdict(set)
        for t in t_args:
            by_sig[_signature(t, window)].add(t)
        sim = {t: by_sig[_signature(t, window)] for t in t_args}
    else:
        sim = {t: {t} for t in t_args}
    train_x = {x for x, _ in pairs}
    train_y = {y for _, y in pairs}

    def overlap(a, own):
        return a in own or all(set(a) & set(b) for b in own)

    result = set()
    for t2 in t_args:
        own = t_args[t2]
        t1s = {t1 for pre in sim[t2] for a in t_args[pre] for t1 in a_templs[a] if t1 != t2}
        cands = {a for t1 in t1s if len(t_args[t1]) > 1 for a in t_args[t1] if not overlap(a, own)}
        cut = t2.index(SEP[0])
        t_in, t_out = t2[1:cut], t2[cut + 1:-1]
        for a in cands:
            names = dict(zip(WUGS, a))

            def realize(part, names=names):
                out, used = [], set()
                for tok in part:
                    if tok in names:
                        used.add(tok)
                        out += list(names[tok])
                    else:
                        out.append(tok)
                return tuple(out), used

            x, used_x = realize(t_in)
            y, used_y = realize(t_out)
            if (not output_only and not used_x) or not used_y:
                continue
            if len(used_x | used_y) != len(names):
                continue
            if (output_only or x not in train_x) and y not in train_y:
                result.add(((() if output_only else x), y))
    return result


def direct_fragments(x, y, wug_size, wug_count):
    """The distinct fragments the recursive enumeration emits for one example (no limit)."""
    x, y = tuple(x), tuple(y)
    keep = {side[i:i + n] for side in (x, y) for n in range(1, wug_size + 1)
            for i in range(len(side) + 1 - n)}
    seq = BOS + x + SEP + y + EOS
    return {args for _, args in _generic(seq, keep, 0, 0, (), wug_size, wug_count)}
