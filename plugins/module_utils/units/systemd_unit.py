# -*- coding: utf-8 -*-
# Copyright: gpufleet.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Quote command lines and environment assignments for systemd unit files.

Pure functions, no Ansible import. systemd parses ``ExecStart=`` (systemd.service(5),
"Command lines") roughly like a shell, but not quite:

* words are split at whitespace; double or single quotes group a word;
* C-style backslash escapes (``\\n``, ``\\t``, ``\\\\``, ``\\"``, ``\\xHH``, ...) are decoded in
  quoted and unquoted words alike, so every literal backslash must be doubled;
* ``%`` starts a unit specifier everywhere (``%n``, ``%i``): a literal percent is ``%%``;
* ``$FOO`` and ``${FOO}`` are replaced by environment variables in ``ExecStart=`` (quoted or
  not): a literal dollar is ``$$``;
* an unquoted lone ``;`` separates commands;
* the first word may carry prefixes (``@``, ``-``, ``:``, ``+``, ``!``) with special meaning.

``Environment=`` assignments use the same quoting and specifiers, but no ``$`` expansion.

This module renders an argv so that the argv systemd hands to the process is exactly the
list given (``quote_exec_argv``), and parses a rendered line back (``parse_exec_line``) so
tests and validators can check the round trip.
"""

from __future__ import absolute_import, annotations, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.vllm.plugins.module_utils.error_boundary import UserError

# Characters that never need quoting in a systemd command line word.
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_./:,=+@^-]+\Z")
# First-word prefixes that change how systemd runs the command (systemd.service(5), table 1).
EXEC_PREFIXES = "@-:+!"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")

_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\n": "\\n",
    "\t": "\\t",
    "\r": "\\r",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\v": "\\v",
}

_UNESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "s": " ",
    "\\": "\\",
    '"': '"',
    "'": "'",
    ";": ";",  # "\;" is how a unit passes a lone semicolon
}


class SystemdQuoteError(UserError, ValueError):
    """An argument cannot be represented in a systemd unit file."""


def _escape_char(char):
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char == "\0":
        raise SystemdQuoteError("a NUL byte cannot be passed through a systemd unit file")
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return "\\x%02x" % ord(char)
    return char


def quote_word(word, expand_dollar=True):
    """Return ``word`` as one systemd command line word.

    ``expand_dollar`` is True for ``ExecStart=`` (where ``$`` must be written ``$$``) and
    False for ``Environment=`` (no variable expansion there).
    """
    if not isinstance(word, str):
        raise SystemdQuoteError(
            "every argument must be a string, got %s %r: quote numbers as strings in the argv"
            % (type(word).__name__, word)
        )
    word = word.replace("%", "%%")
    if expand_dollar:
        word = word.replace("$", "$$")
    if word and _SAFE_WORD.match(word):
        return word
    return '"' + "".join(_escape_char(c) for c in word) + '"'


def quote_exec_argv(argv):
    """Render an argv (list of strings) as the value of ``ExecStart=``.

    The first element must be an absolute path; it is written without quotes so systemd
    does not read a leading character as a prefix.
    """
    if isinstance(argv, (str, bytes)) or not hasattr(argv, "__iter__"):
        raise SystemdQuoteError("the command must be a list of strings, got %s" % type(argv).__name__)
    argv = list(argv)
    if not argv:
        raise SystemdQuoteError("the command is empty: give at least the executable")
    exe = argv[0]
    if not isinstance(exe, str) or not exe.startswith("/"):
        raise SystemdQuoteError(
            "the executable %r must be an absolute path (systemd reads a leading %s as a prefix)"
            % (exe, " ".join(EXEC_PREFIXES))
        )
    # A quoted absolute path is fine too: systemd then sees '"' first, which is no prefix.
    words = [quote_word(exe)]
    words.extend(quote_word(arg) for arg in argv[1:])
    return " ".join(words)


def quote_environment(name, value):
    """Render one ``Environment=`` assignment (``"NAME=value"`` quoted as needed)."""
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise SystemdQuoteError(
            "%r is not a valid environment variable name (letters, digits, underscore; not starting with a digit)"
            % (name,)
        )
    if isinstance(value, bool):
        value = "1" if value else "0"
    elif isinstance(value, (int, float)):
        value = str(value)
    if not isinstance(value, str):
        raise SystemdQuoteError("the value of %s must be a string, got %s" % (name, type(value).__name__))
    return quote_word("%s=%s" % (name, value), expand_dollar=False)


def _unescape(text, pos):
    """Decode one backslash escape starting after the backslash at ``pos``; return (char, new_pos)."""
    if pos >= len(text):
        raise SystemdQuoteError("a trailing backslash is a line continuation, not part of a word")
    char = text[pos]
    if char in _UNESCAPES:
        return _UNESCAPES[char], pos + 1
    if char == "x":
        digits = text[pos + 1:pos + 3]
        if len(digits) != 2 or not re.match(r"^[0-9a-fA-F]{2}$", digits):
            raise SystemdQuoteError("bad \\x escape at offset %d" % pos)
        return chr(int(digits, 16)), pos + 3
    if char in "01234567":
        digits = text[pos:pos + 3]
        if len(digits) != 3 or not re.match(r"^[0-7]{3}$", digits):
            raise SystemdQuoteError("bad octal escape at offset %d" % pos)
        return chr(int(digits, 8)), pos + 3
    if char in "uU":
        width = 4 if char == "u" else 8
        digits = text[pos + 1:pos + 1 + width]
        if len(digits) != width or not re.match(r"^[0-9a-fA-F]+$", digits):
            raise SystemdQuoteError("bad \\%s escape at offset %d" % (char, pos))
        return chr(int(digits, 16)), pos + 1 + width
    raise SystemdQuoteError("unknown escape \\%s at offset %d" % (char, pos))


def _unspecify(word, expand_dollar):
    """Undo %% and $$ doubling; refuse real specifiers and variable references."""
    out = []
    i = 0
    while i < len(word):
        char = word[i]
        if char == "%" or (expand_dollar and char == "$"):
            if word[i + 1:i + 2] == char:
                out.append(char)
                i += 2
                continue
            raise SystemdQuoteError(
                "%r holds a systemd %s that this parser does not expand"
                % (word, "specifier" if char == "%" else "variable reference")
            )
        out.append(char)
        i += 1
    return "".join(out)


def split_words(line):
    """Split a systemd command line into raw words (quotes and escapes decoded, specifiers kept)."""
    words = []
    i = 0
    n = len(line)
    while True:
        while i < n and line[i] in " \t\n":
            i += 1
        if i >= n:
            return words
        if line[i] == ";" and (i + 1 == n or line[i + 1] in " \t\n"):
            raise SystemdQuoteError("an unquoted ';' separates commands: quote it to pass it as an argument")
        buf = []
        quote = None
        while i < n:
            char = line[i]
            if quote:
                if char == quote:
                    quote = None
                    i += 1
                elif char == "\\":
                    decoded, i = _unescape(line, i + 1)
                    buf.append(decoded)
                else:
                    buf.append(char)
                    i += 1
            elif char in " \t\n":
                break
            elif char in "\"'":
                quote = char
                i += 1
            elif char == "\\":
                decoded, i = _unescape(line, i + 1)
                buf.append(decoded)
            else:
                buf.append(char)
                i += 1
        if quote:
            raise SystemdQuoteError("unterminated %s quote in %r" % (quote, line))
        words.append("".join(buf))


def parse_exec_line(line):
    """Parse an ``ExecStart=`` value back into the argv systemd would pass."""
    return [_unspecify(word, expand_dollar=True) for word in split_words(line)]


def parse_environment(line):
    """Parse an ``Environment=`` value into a dict of assignments."""
    result = {}
    for word in split_words(line):
        word = _unspecify(word, expand_dollar=False)
        name, sep, value = word.partition("=")
        if not sep or not _ENV_NAME.match(name):
            raise SystemdQuoteError("%r is not a NAME=value assignment" % (word,))
        result[name] = value
    return result
