"""What every spec model shares: unknown keys are errors, models are frozen, numbers are strict and
finite, and the strings that reach a shell, a YAML command or a resource name are checked here, at
spec load (not at apply: `hetinfra plan` writes SkyPilot YAMLs that users run directly).

Strict numbers: ``rate_rps: true`` is an error, not 1, and ``.nan``/``.inf`` (or ``1e999``) are
refused by every float field; each field states its range in its Field(...).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from hetinfra.facts import is_dns_label  # the one DNS-label rule

__all__ = ["Strict", "dns_name", "fit_label", "is_dns_label", "ShellArg", "ResourceWord", "FilePath", "Label", "shell_arg"]


class Strict(BaseModel):
    """A spec model: extra="forbid" (a typo is an error with a did-you-mean), frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


def dns_name(value: str, what: str) -> str:
    """``value`` when it is a DNS label (it names cloud resources), else ValueError naming ``what``."""
    if not is_dns_label(value):
        raise ValueError(f"{what} {value!r} must be lowercase letters, digits and '-', 1-63 characters "
                         "(it names cloud resources)")
    return value


def fit_label(name: str, limit: int = 63) -> str:
    """``name`` when it fits ``limit`` characters, else cut and ending in ``-`` and 8 hex digits of
    the SHA-256 of the whole name: the one way a generated resource name (a SkyPilot cluster, a node
    pool) is shortened, so two long names that share their first ``limit`` characters stay distinct."""
    if len(name) <= limit:
        return name
    import hashlib

    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return name[: limit - len(digest) - 1].rstrip("-") + "-" + digest


#: characters a shell argument may not hold even quoted: whitespace and controls (they split lines of
#: scripts, env files and YAML), quotes, '`', '$', '\\' and ';|&<>' (they would need escaping everywhere)
_SHELL_BAD = re.compile(r"[\s'\"`$\\;|&<>\x00-\x1f\x7f]")
#: a word that names a cloud resource or an instance type: letters, digits, '.', '_', '-'
_RESOURCE_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MAX_SHELL_ARG = 256


def shell_arg(value: str) -> str:
    """``value`` when it may be passed as one argument on a generated command line (a model source,
    a pip requirement, a path): 1-256 printable characters, none of _SHELL_BAD, not starting with '-'."""
    if not value or len(value) > MAX_SHELL_ARG or not value.isprintable():
        raise ValueError(f"must be 1-{MAX_SHELL_ARG} printable characters (it reaches generated scripts)")
    if _SHELL_BAD.search(value) or value.startswith("-"):
        raise ValueError(f"{value[:60]!r} may not contain whitespace, quotes, '`', '$', '\\', ';', '|', '&', "
                         "'<', '>' or start with '-' (it reaches generated scripts)")
    return value


def _resource_word(value: str) -> str:
    if not _RESOURCE_WORD.match(value):
        raise ValueError(f"{value[:60]!r} must be letters, digits, '.', '_' and '-', at most 128 characters "
                         "(it names cloud resources)")
    return value


def _file_path(value: str) -> str:
    if not value or len(value) > 4096 or not value.isprintable():
        raise ValueError("a path must be 1-4096 printable characters")
    return value


def _label(value: str) -> str:
    if not value or len(value) > 128 or not value.isprintable() or re.search(r"[;&$`\\\"']", value):
        raise ValueError(f"{value[:60]!r} must be 1-128 printable characters without ';', '&', '$', '`', '\\' "
                         "or quotes (it is written into plans and generated files)")
    return value


#: a name shown in plans and written to generated files, never run (a class name: 'in<=500,out<=200')
Label = Annotated[str, AfterValidator(_label)]
#: one argument of a generated command line (see shell_arg)
ShellArg = Annotated[str, AfterValidator(shell_arg)]
#: a cloud, region, GPU or instance-type name
ResourceWord = Annotated[str, AfterValidator(_resource_word)]
#: a local file path (read on this machine only)
FilePath = Annotated[str, AfterValidator(_file_path)]
