"""The counter-based random stream: fixed known values in Python and in C++ (the header
the runner uses, compiled here), and the properties sampling relies on."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from compgen.decoding.random_stream import LATENT_STEP, bits, splitmix64, uniform

HEADER = Path(__file__).resolve().parents[1] / "cpp_runner" / "src" / "random_stream.hpp"
# (seed, index, step) -> 64 bits, computed with plain Python integers modulo 2**64
KNOWN = [((0, 0, 0), 2558736989570252433),
         ((1, 2, 3), 15020427595393229491),
         ((-1, 5, 7), 10252906808311629690),
         ((123456789, 1023, 44), 9720579226426551318),
         ((2 ** 63 + 5, 7, LATENT_STEP), 958138057490269034)]


def test_splitmix64_matches_the_published_first_output():
    # the first output of a splitmix64 generator seeded with 0 is 0xE220A8397B1DCDAF
    assert int(splitmix64(0)) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("key,expected", KNOWN)
def test_known_values_in_python(key, expected):
    assert int(bits(*key)) == expected
    assert float(uniform(*key)) == (expected >> 11) * 2.0 ** -53


def test_arrays_broadcast_to_the_scalar_values():
    index = np.arange(40)
    drawn = uniform(7, index[:, None], np.arange(5)[None, :])
    assert drawn.shape == (40, 5)
    assert drawn[13, 4] == float(uniform(7, 13, 4))
    assert ((drawn >= 0) & (drawn < 1)).all()
    assert len(np.unique(drawn)) == drawn.size


def test_same_values_in_cpp(tmp_path):
    compiler = shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (c++) on PATH")
    source = tmp_path / "stream.cpp"
    source.write_text(
        '#include <cstdio>\n#include <cinttypes>\n#include "random_stream.hpp"\n'
        "int main() {\n"
        "  const uint64_t keys[][3] = {"
        + ", ".join("{" + ", ".join(f"{v % 2 ** 64}ULL" for v in k) + "}" for k, _ in KNOWN)
        + "};\n"
        "  for (const auto& k : keys)\n"
        '    std::printf("%" PRIu64 " %.17g\\n", compgen::stream_bits(k[0], k[1], k[2]),\n'
        "                compgen::stream_uniform(k[0], k[1], k[2]));\n"
        "}\n")
    binary = tmp_path / "stream"
    subprocess.run([compiler, "-std=c++17", "-O2", f"-I{HEADER.parent}", str(source), "-o",
                    str(binary)], check=True)
    lines = subprocess.run([str(binary)], check=True, capture_output=True,
                           text=True).stdout.split("\n")
    for (key, expected), line in zip(KNOWN, lines):
        got_bits, got_uniform = line.split()
        assert int(got_bits) == expected
        assert float(got_uniform) == float(uniform(*key))
