"""What every spec model shares: unknown keys are errors, models are frozen, numbers are strict and
finite, and the strings that reach a shell, a YAML command or a resource name are checked here, at
spec load (not at apply: `hetinfra plan` writes SkyPilot YAMLs that users run directly).

Strict numbers: ``rate_rps: true`` is an error, not 1, and ``.nan``/``.inf`` (or ``1e999``) are
refused by every float field; each field states its range in its Field(...).
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from hetinfra.facts import is_dns_label  # the one DNS-label rule

__all__ = ["Strict", "ShellChecked", "dns_name", "is_dns_label", "word_problem", "SHELL_META",
           "QUOTE_META", "LOOSE_KEYS", "PROSE_KEYS", "ShellArg", "ResourceWord", "FilePath", "FileBase", "HostFilePath", "Label", "shell_arg",
           "is_resource_word"]


class Strict(BaseModel):
    """A spec model: extra="forbid" (a typo is an error with a did-you-mean), frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


#: characters a shell gives a meaning to: refused in every string that plan.json's shell-bound
#: sections carry (hetinfra.document.base.shell_safety_error applies this same rule to plan.json)
SHELL_META = re.compile(r"[;&|$`\\\"'<>(){}\[\]*?!#~\s]")
#: the quoting and expansion characters refused even in keys that are never put on a command line
QUOTE_META = re.compile(r"[;&$`\\\"']")
#: keys whose values are prose (never checked) and keys never interpolated into a shell (QUOTE_META only)
PROSE_KEYS = frozenset({"max_model_len_basis", "confidence_reason", "reason", "description", "note"})
LOOSE_KEYS = frozenset({"unit", "template", "ssh_public_key", "tls_cert", "tls_key", "package", "confidence"})


def word_problem(value: str, loose: bool = False) -> str | None:
    """Why ``value`` may not reach a generated script or plan.json (None when it may): the one rule
    of the spec's deploy strings, served names and command-line words and of plan.json's reader.
    ``loose``: a key in LOOSE_KEYS, a class name or a routing key (only quoting is refused)."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "contains a control character"
    if loose:
        return "contains a shell metacharacter" if QUOTE_META.search(value) else None
    if SHELL_META.search(value):
        return "contains a shell metacharacter or whitespace"
    # a word is one argument of a generated command line (vLLM's --served-model-name, pip's requirement,
    # kubectl's --context): one starting with '-' is read as an option there, not as the value
    return "starts with '-' (a command line reads it as an option)" if value.startswith("-") else None


def _strings_of(value, leaf: str):
    """(leaf key, string) of every string in ``value``: dict keys too, prose keys left out."""
    if isinstance(value, str):
        yield leaf, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k), str(k)
            if str(k) not in PROSE_KEYS and not isinstance(v, BaseModel):
                yield from _strings_of(v, str(k))
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings_of(v, leaf)


class ShellChecked(Strict):
    """A spec section plan.json copies into a shell-bound section (``deploy``): every string field and
    dict key obeys :func:`word_problem`, checked at spec load (the error names the spec's line) and
    again by plan.json's model, which inherits this class: the two can never disagree."""

    #: fields plan.json does not carry (a file path read at plan time): not checked here
    shell_unchecked: ClassVar[frozenset] = frozenset()

    @model_validator(mode="after")
    def _words(self):
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, BaseModel) or name in PROSE_KEYS or name in self.shell_unchecked:
                continue  # a section of its own checks itself
            for leaf, text in _strings_of(value, name):
                why = word_problem(text, loose=leaf in LOOSE_KEYS)
                if why:
                    where = name if leaf == name else f"{name}: key"
                    raise ValueError(f"{where} {text[:60]!r} {why} (it reaches generated scripts and plan.json)")
        return self


def dns_name(value: str, what: str, *, letter_first: bool = False) -> str:
    """``value`` when it is a DNS label (it names cloud resources), else ValueError naming ``what``;
    ``letter_first`` as :func:`hetinfra.facts.is_dns_label` (plan.json's reader holds the service name
    to it, so the spec must: `name: 9chat` was refused blaming plan.json)."""
    if not is_dns_label(value, letter_first=letter_first):
        first = ", starting with a letter" if letter_first else ""
        raise ValueError(f"{what} {value!r} must be lowercase letters, digits and '-', 1-63 characters{first} "
                         "(it names cloud resources)")
    return value


#: characters a shell argument may not hold even quoted: whitespace and controls (they split lines of
#: scripts, env files and YAML), quotes, '`', '$', '\\' and ';|&<>' (they would need escaping everywhere)
_SHELL_BAD = re.compile(r"[\s'\"`$\\;|&<>\x00-\x1f\x7f]")
#: a word that names a cloud resource or an instance type: letters, digits, '.', '_', '-'
_RESOURCE_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
MAX_SHELL_ARG = 256


def shell_arg(value: str) -> str:
    """``value`` when it may be passed as one argument on a generated command line (a model source,
    a pip requirement, a path): 1-256 printable characters, none of _SHELL_BAD, not starting with '-'.
    (Where plan.json carries it, :class:`ShellChecked` or the served-name rule adds SHELL_META.)"""
    if not value or len(value) > MAX_SHELL_ARG or not value.isprintable():
        raise ValueError(f"must be 1-{MAX_SHELL_ARG} printable characters (it reaches generated scripts)")
    if _SHELL_BAD.search(value) or value.startswith("-"):
        raise ValueError(f"{value[:60]!r} may not contain whitespace, quotes, '`', '$', '\\', ';', '|', '&', "
                         "'<', '>' or start with '-' (it reaches generated scripts)")
    return value


def is_resource_word(value: str) -> bool:
    """Whether ``value`` may name a cloud, region, GPU or instance type (the spec's ResourceWord, the
    offers CSV's name cells): letters, digits, '.', '_', '-', a letter or digit first, at most 128."""
    return bool(_RESOURCE_WORD.match(value))


def _resource_word(value: str) -> str:
    if not is_resource_word(value):
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
#: the separators the planner joins user names with into its flow keys: "<class>~<adapter>" (an
#: adapter's requests of a class: hetinfra.plan.adapters) and "<class>@<origin region>" (an origin's
#: requests: hetinfra.plan.origins); a class or adapter name holding one would be read as another flow
ADAPTER_KEY_SEP = "~"
ORIGIN_KEY_SEP = "@"


def key_part(value: str, what: str) -> str:
    """``value`` if it can be one part of a flow key (no :data:`ADAPTER_KEY_SEP` or :data:`ORIGIN_KEY_SEP`),
    else a ValueError naming ``what`` and the separator: the one check every class and adapter name passes."""
    for sep in (ADAPTER_KEY_SEP, ORIGIN_KEY_SEP):
        if sep in value:
            raise ValueError(f"{what} {value!r} may not contain '{sep}' (the planner keys flows "
                             f"<class>{ADAPTER_KEY_SEP}<adapter>{ORIGIN_KEY_SEP}<origin region>)")
    return value


def _unbracketed(value: str) -> str:
    """A class name without '[' or ']': the plan's and simulate's tables print class names through
    Rich, which reads '[/]' or '[bold]' as markup (a class named '[/]a' was a MarkupError traceback in
    `hetinfra simulate`)."""
    if "[" in value or "]" in value:
        raise ValueError(f"class name {value[:60]!r} may not contain '[' or ']' (the plan's tables would read "
                         "them as styling)")
    return value


#: a request class's name: a Label that can be one part of a flow key, without brackets
ClassName = Annotated[str, AfterValidator(_label), AfterValidator(lambda v: key_part(v, "class name")),
                      AfterValidator(_unbracketed)]
#: one argument of a generated command line (see shell_arg)
ShellArg = Annotated[str, AfterValidator(shell_arg)]
#: a cloud, region, GPU or instance-type name
ResourceWord = Annotated[str, AfterValidator(_resource_word)]
class FileBase(str):
    """Where a relative path of a spec's file field is (hetinfra.spec.files reads the mark): ``spec``, the
    spec file's folder (files plan reads); ``cwd``, the working directory of the command that reads it
    (the deploying machine's files apply reads: TLS files, a kubeconfig)."""


#: a local file path (read on this machine only), relative to the spec file
FilePath = Annotated[str, AfterValidator(_file_path), FileBase("spec")]
#: a local file path read by `apply` on the deploying machine, relative to its working directory
HostFilePath = Annotated[str, AfterValidator(_file_path), FileBase("cwd")]
