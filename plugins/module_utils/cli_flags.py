# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command-line flags as vLLM's and vllm-router's argparse read them: the one matcher every guard over
extra args uses, and the one reader of a flag's value in an argv (pure, no Ansible import).

What argparse does with a word (CPython 3.9-3.13 ``ArgumentParser._parse_optional``, ``allow_abbrev=True``,
the default; vLLM's ``FlexibleArgumentParser`` keeps it, vllm/utils/argparse_utils.py):
- ``--flag=value`` is ``--flag value``;
- a word that is no exact flag but the prefix of exactly one flag IS that flag (``--hos`` -> ``--host``); the
  prefix of several is an error (vLLM exits), so a guard may refuse it too;
- vLLM first turns ``_`` into ``-`` in the name (the part after ``--`` up to the first ``.``:
  ``--api_key`` -> ``--api-key``; ``--speculative_config.x`` -> ``--speculative-config.x``).
The guard is conservative: every prefix of a guarded flag (``--h`` included) is refused unless it is a flag of
its own in ``known``.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type


def flag_name(word):
    """The flag a word names, as the parser sees it: ``--api_key=x`` -> ``--api-key``; None for a non-flag."""
    word = str(word)
    if not word.startswith("-") or word == "-" or word == "--":
        return None
    name = word.split("=", 1)[0]
    if name.startswith("--"):
        head, dot, rest = name[2:].partition(".")
        return "--" + head.replace("_", "-")
    return name


def guarded_flag(word, guarded, known=()):
    """The guarded flag argparse would take ``word`` for (its exact name, or a prefix of it), else None.

    ``guarded``: the flags the caller refuses; ``known``: other flags of the parser (a word equal to one of them
    is that flag, not a prefix of a guarded one)."""
    name = flag_name(word)
    if name is None:
        return None
    if name in guarded:
        return name
    if name in known or not name.startswith("--") or len(name) < 3:
        return None
    hits = [flag for flag in guarded if flag.startswith("--") and flag.startswith(name)]
    return sorted(hits, key=len)[0] if hits else None


def guarded_words(argv, guarded, known=()):
    """[(index, word, guarded flag)] for every word of ``argv`` that argparse would read as a guarded flag."""
    out = []
    for index, word in enumerate(argv or []):
        flag = guarded_flag(word, guarded, known)
        if flag is not None:
            out.append((index, str(word), flag))
    return out


def flag_values(argv, flag, known=()):
    """Every value given for ``flag`` in ``argv``, in order (argparse keeps the LAST one): ``--flag v``,
    ``--flag=v`` and the abbreviations argparse accepts. A flag with no value gives None."""
    args = [str(a) for a in (argv or [])]
    out = []
    for index, word in enumerate(args):
        if guarded_flag(word, (flag,), known) != flag:
            continue
        if "=" in word:
            out.append(word.split("=", 1)[1])
        elif index + 1 < len(args) and not args[index + 1].startswith("--"):
            out.append(args[index + 1])
        else:
            out.append(None)
    return out


def flag_value(argv, flag, default=None, known=()):
    """The value argparse ends with for ``flag`` (the last one given), or ``default``."""
    values = [v for v in flag_values(argv, flag, known) if v is not None]
    return values[-1] if values else default


def flag_map(argv):
    """``{flag: value}`` of every ``--flag`` word in ``argv`` as argparse ends with it (the last of a repeated flag,
    ``--f=v``, a bare ``--f`` is ``True``, vLLM's underscores as dashes); the positionals, in order, under ``""``.
    An abbreviation stays as written: resolving it needs the parser's own flag list (flag_value takes one)."""
    out = {}
    positional = []
    items = [str(a) for a in argv or []]
    index = 0
    while index < len(items):
        word = items[index]
        if not word.startswith("--"):
            positional.append(word)
        elif "=" in word:
            out[flag_name(word)] = word.split("=", 1)[1]
        elif index + 1 < len(items) and not items[index + 1].startswith("--"):
            out[flag_name(word)] = items[index + 1]
            index += 1
        else:
            out[flag_name(word)] = True
        index += 1
    out[""] = positional
    return out
