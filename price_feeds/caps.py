"""Availability caps as data: one cap is how many GPUs of a kind one may run in a cloud region
(per purchase option), from a user caps CSV or a cloud's API (:mod:`hetinfra.price_feeds.availability`
gathers them). :func:`caps_dict` gives the planner's ``{(cloud, region, gpu): max_gpus}``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from hetinfra.errors import InvalidInputError
from hetinfra.csvtext import number_cell
from hetinfra.fileio import read_text
from hetinfra.csvtext import csv_records

#: the largest cap a caps CSV may give (one region's GPUs of one kind)
MAX_CAP_GPUS = 100_000

CAPS_COLUMNS = ("cloud", "region", "gpu", "max_gpus")
PURCHASES = ("on-demand", "spot")


@dataclass(frozen=True)
class AvailabilityCap:
    cloud: str
    region: str
    gpu: str
    max_gpus: int
    purchase: str = "on-demand"
    source: str = ""
    #: ``file:line`` of a caps CSV row ("" from a cloud's API): the planner checks a row's names as
    #: strictly as the spec's availability entries, and says where it is
    where: str = field(default="", compare=False)


class Caps(dict):
    """The planner's ``{(cloud, region, gpu): max_gpus}``, and ``written``: for the keys a caps CSV
    row names, that row's ``file:line`` (a user's file is checked strictly; a cloud's API may
    report quotas on GPUs nothing offers, such as GCP's P100); ``skipped``: the caps of another
    purchase option that :func:`caps_dict` left out (what the planner warns it does not apply)."""

    def __init__(self, *args, written: dict | None = None, **kw):
        super().__init__(*args, **kw)
        self.written: dict[tuple[str, str, str], str] = dict(written or {})
        self.skipped: list[AvailabilityCap] = []


def parse_caps_csv(text: str, *, name: str) -> list[AvailabilityCap]:
    header, records = csv_records(text, name, known=CAPS_COLUMNS + ("purchase",))
    missing = [c for c in CAPS_COLUMNS if c not in header]
    if missing:
        raise InvalidInputError(f"{name}: caps CSV lacks column(s) {', '.join(missing)}",
                                hint="header must be: " + ",".join(CAPS_COLUMNS) + " (optional: purchase)")
    out = []
    first: dict[tuple[str, str, str, str], AvailabilityCap] = {}
    for lineno, row in records:
        row = {k: (v or "").strip() for k, v in row.items() if k is not None}
        where = f"{name}:{lineno}"
        for col in ("cloud", "region", "gpu"):
            if not row.get(col):
                raise InvalidInputError(f"{where}: column '{col}' is empty")
        n = number_cell(row["max_gpus"], where=where, column="max_gpus", lo=0, hi=MAX_CAP_GPUS, whole=True)
        if n is None:
            raise InvalidInputError(f"{where}: column 'max_gpus' is empty", hint="give a whole number >= 0")
        purchase = row.get("purchase") or "on-demand"
        if purchase not in PURCHASES:
            raise InvalidInputError(f"{where}: purchase must be one of {', '.join(PURCHASES)}, got {purchase!r}")
        cap = AvailabilityCap(row["cloud"].lower(), row["region"], row["gpu"], int(n), purchase, name, where)
        _one_cap_per_key(cap, first)
        out.append(cap)
    return out


def _one_cap_per_key(cap: AvailabilityCap, first: dict) -> None:
    """Two rows of a caps CSV capping one cloud, region, GPU and purchase option differently are
    refused with both lines (one of them would bind, silently); a row repeated as it stands is
    harmless. ``first``: key -> the first row of it, filled in here."""
    key = (cap.cloud, cap.region, cap.gpu, cap.purchase)
    earlier = first.setdefault(key, cap)
    if earlier.max_gpus != cap.max_gpus:
        raise InvalidInputError(f"{cap.where}: cap {'/'.join(key[:3])} ({cap.purchase}) is {cap.max_gpus} GPUs, "
                                f"{earlier.where} gives {earlier.max_gpus}",
                                hint="keep one row per cloud, region, GPU and purchase")


def load_caps_csv(path: Path | str) -> list[AvailabilityCap]:
    path = Path(path)
    text = read_text(path, "caps file")
    return parse_caps_csv(text, name=str(path))


def caps_dict(caps: Iterable[AvailabilityCap], *, purchase: str = "on-demand") -> Caps:
    """The caps of one ``purchase`` option by (cloud, region, GPU), the lowest where rows of several
    sources (a caps CSV, the clouds' APIs) name a key; the other options' rows in ``skipped``. (One
    caps CSV's rows never disagree on a key: :func:`parse_caps_csv` refuses that.)"""
    out = Caps()
    for c in caps:
        if c.purchase != purchase:
            out.skipped.append(c)
            continue
        key = (c.cloud, c.region, c.gpu)
        out[key] = min(c.max_gpus, out.get(key, c.max_gpus))
        if c.where:
            out.written.setdefault(key, c.where)
    return out
