"""The price catalog: what a node of a preset, a GiB of disk or a bucket costs, and where each figure is from.

The product ships one catalog (`price_catalog.yaml`, in the package so the wheel carries it). A user's file
(`--prices FILE`, or `NPA_PRICES=FILE`) has the same format and is layered over it: its entries are looked up
first (for a platform, its per-unit prices beat the shipped per-preset prices, so a negotiated GPU price
changes every preset of that platform), and `mode: replace` drops the shipped catalog altogether.

A price that is not known stays unknown (None), never zero: `plan/cost.py` lists such items as unknown.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from npa_pulumi.errors import UserInputError
from npa_pulumi.runtime import disk_cache
from npa_pulumi.spec.errors import SpecError
from npa_pulumi.spec.yaml_source import LocationIndex, load_yaml

PRICES_ENV = "NPA_PRICES"
BUILTIN_ORIGIN = "built-in"
HOURS_PER_MONTH = Decimal(730)


class Pricing(StrEnum):
    """How a pool is billed."""

    ON_DEMAND = "on-demand"
    PREEMPTIBLE = "preemptible"
    RESERVED = "reserved"  # bound to a capacity block: a contract price, shown apart from on-demand


class StorageKind(StrEnum):
    DISK = "disk"
    FILESYSTEM = "filesystem"
    BUCKET = "bucket"


class PricesFileError(UserInputError):
    """A --prices file that cannot be read or does not have the catalog's shape: named, with its line."""

    kind = "invalid-prices"


def _decimal(value: Any) -> Any:
    # A float goes through its shortest text (23.6, not 23.60000000000000142...): prices stay exact sums.
    if isinstance(value, bool):
        raise ValueError("a price is a number, not a boolean")
    if isinstance(value, float):
        return Decimal(str(value))
    return value


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Entry):
    title: str
    url: str = ""
    date: str


class ComputePrice(_Entry):
    """One node of a preset, per hour."""

    platform: str
    preset: str
    region: str | None = None
    on_demand_hourly_usd: Decimal | None = Field(default=None, ge=0)
    preemptible_hourly_usd: Decimal | None = Field(default=None, ge=0)
    source: str = ""

    _prices = field_validator("on_demand_hourly_usd", "preemptible_hourly_usd", mode="before")(_decimal)


class UnitPrice(_Entry):
    """Per GPU, vCPU and GiB of memory, per hour: a preset's price is their sum."""

    platform: str
    region: str | None = None
    gpu_hourly_usd: Decimal | None = Field(default=None, ge=0)
    vcpu_hourly_usd: Decimal | None = Field(default=None, ge=0)
    memory_gib_hourly_usd: Decimal | None = Field(default=None, ge=0)
    preemptible_gpu_hourly_usd: Decimal | None = Field(default=None, ge=0)
    preemptible_vcpu_hourly_usd: Decimal | None = Field(default=None, ge=0)
    preemptible_memory_gib_hourly_usd: Decimal | None = Field(default=None, ge=0)
    source: str = ""

    _prices = field_validator(
        "gpu_hourly_usd",
        "vcpu_hourly_usd",
        "memory_gib_hourly_usd",
        "preemptible_gpu_hourly_usd",
        "preemptible_vcpu_hourly_usd",
        "preemptible_memory_gib_hourly_usd",
        mode="before",
    )(_decimal)


class Unpriced(_Entry):
    platform: str
    preset: str | None = None
    reason: str


class StoragePrice(_Entry):
    """Per GiB-month. `type`: a disk type or a bucket's storage class; None matches any."""

    kind: StorageKind
    type: str | None = None
    region: str | None = None
    gib_month_usd: Decimal | None = Field(default=None, ge=0)
    reason: str = ""
    source: str = ""

    _prices = field_validator("gib_month_usd", mode="before")(_decimal)


class ReservedPrice(_Entry):
    """A capacity-block (reserved) node of a preset, per hour: from the user's contract."""

    platform: str
    preset: str | None = None  # None: every preset of the platform
    region: str | None = None
    hourly_usd: Decimal = Field(ge=0)
    source: str = ""

    _prices = field_validator("hourly_usd", mode="before")(_decimal)


class CatalogMode(StrEnum):
    EXTEND = "extend"
    REPLACE = "replace"


class CatalogFile(_Entry):
    """The format of `price_catalog.yaml` and of a user's --prices file."""

    format: int = 1
    version: str = ""
    date: str = ""
    currency: str = "USD"
    hours_per_month: int = 730
    mode: CatalogMode = CatalogMode.EXTEND
    sources: dict[str, Source] = Field(default_factory=dict)
    compute: list[ComputePrice] = Field(default_factory=list)
    units: list[UnitPrice] = Field(default_factory=list)
    unpriced: list[Unpriced] = Field(default_factory=list)
    storage: list[StoragePrice] = Field(default_factory=list)
    reserved: list[ReservedPrice] = Field(default_factory=list)

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: int) -> int:
        if value != 1:
            raise ValueError(f"format {value} is not known to this npa-pulumi (it reads format 1)")
        return value

    @field_validator("currency")
    @classmethod
    def _usd(cls, value: str) -> str:
        if value.upper() != "USD":
            raise ValueError("only USD prices are supported")
        return "USD"

    @field_validator("hours_per_month")
    @classmethod
    def _month(cls, value: int) -> int:
        if value != 730:
            raise ValueError("a month is 730 hours in npa-pulumi (Infracost's convention)")
        return value


@dataclass(frozen=True)
class Layer:
    """One catalog file and where it came from (`built-in` or the file's path)."""

    origin: str
    file: CatalogFile

    def source_label(self, key: str) -> str:
        """`<key> (<date>)` for a source key of this file (`prices` prints the titles); the text itself when
        it is no key; the file when none is given."""
        if not key:
            return self.origin
        source = self.file.sources.get(key)
        return f"{key} ({source.date})" if source else key


@dataclass(frozen=True)
class Quote:
    """A price found, with where it came from."""

    hourly_usd: Decimal
    source: str
    basis: str  # "preset" | "units" | "reserved"


@dataclass(frozen=True)
class PriceCatalog:
    """Layers, looked up first to last (the user's file first)."""

    layers: tuple[Layer, ...]

    @property
    def builtin(self) -> Layer | None:
        return next((layer for layer in self.layers if layer.origin == BUILTIN_ORIGIN), None)

    def describe(self) -> dict[str, Any]:
        """Which files make up this catalog (for documents that show a cost)."""
        return {
            "layers": [
                {"origin": layer.origin, "version": layer.file.version, "date": layer.file.date}
                for layer in self.layers
            ],
            "currency": "USD",
            "hours_per_month": int(HOURS_PER_MONTH),
        }

    def compute(
        self, platform: str, preset: str, region: str, pricing: Pricing, *, gpus: int, vcpus: int, memory: int
    ) -> Quote | str:
        """The hourly price of one node, or why it is unknown."""
        if pricing is Pricing.RESERVED:
            return self._reserved(platform, preset, region)
        for layer in self.layers:
            quote = _preset_quote(layer, platform, preset, region, pricing)
            if quote is None:
                quote = _unit_quote(layer, platform, region, pricing, gpus=gpus, vcpus=vcpus, memory=memory)
            if quote is not None:
                return quote
        for layer in self.layers:
            for entry in layer.file.unpriced:
                if entry.platform == platform and entry.preset in (None, preset):
                    return entry.reason
        if pricing is Pricing.PREEMPTIBLE and self._has_on_demand(platform, preset, region):
            return f"no preemptible price for {platform} {preset} in the catalog"
        return f"no price for {platform} {preset} in the catalog"

    def _has_on_demand(self, platform: str, preset: str, region: str) -> bool:
        return any(
            _preset_quote(layer, platform, preset, region, Pricing.ON_DEMAND) is not None
            for layer in self.layers
        )

    def _reserved(self, platform: str, preset: str, region: str) -> Quote | str:
        for layer in self.layers:
            for entry in _regional(layer.file.reserved, region):
                if entry.platform == platform and entry.preset in (None, preset):
                    return Quote(entry.hourly_usd, layer.source_label(entry.source), "reserved")
        return "reserved, not priced (add a `reserved` entry to your --prices file)"

    def storage(self, kind: StorageKind, type_: str | None, region: str) -> tuple[Decimal, str] | str:
        """(price per GiB-month, source), or why it is unknown."""
        reason = ""
        for layer in self.layers:
            for entry in _regional(layer.file.storage, region):
                if entry.kind is not kind or entry.type not in (None, type_):
                    continue
                if entry.gib_month_usd is not None:
                    return entry.gib_month_usd, layer.source_label(entry.source)
                reason = reason or entry.reason
        return reason or f"no {kind.value} price in the catalog"


_T = TypeVar("_T", ComputePrice, UnitPrice, StoragePrice, ReservedPrice)


def _regional(entries: list[_T], region: str) -> list[_T]:
    """Entries that apply in `region`: those of that region first, then those of every region."""
    own = [e for e in entries if e.region and e.region == region]
    return own + [e for e in entries if not e.region]


def _preset_quote(layer: Layer, platform: str, preset: str, region: str, pricing: Pricing) -> Quote | None:
    for entry in _regional(layer.file.compute, region):
        if entry.platform != platform or entry.preset != preset:
            continue
        price = entry.preemptible_hourly_usd if pricing is Pricing.PREEMPTIBLE else entry.on_demand_hourly_usd
        if price is not None:
            return Quote(price, layer.source_label(entry.source), "preset")
    return None


def _unit_quote(
    layer: Layer, platform: str, region: str, pricing: Pricing, *, gpus: int, vcpus: int, memory: int
) -> Quote | None:
    preemptible = pricing is Pricing.PREEMPTIBLE
    for entry in _regional(layer.file.units, region):
        if entry.platform != platform:
            continue
        gpu = entry.preemptible_gpu_hourly_usd if preemptible else entry.gpu_hourly_usd
        vcpu = entry.preemptible_vcpu_hourly_usd if preemptible else entry.vcpu_hourly_usd
        mem = entry.preemptible_memory_gib_hourly_usd if preemptible else entry.memory_gib_hourly_usd
        needed = [(gpus, gpu), (vcpus, vcpu), (memory, mem)]
        if any(count and price is None for count, price in needed) or not (vcpus or gpus):
            continue
        total = sum((Decimal(count) * (price or Decimal(0)) for count, price in needed), Decimal(0))
        return Quote(total, layer.source_label(entry.source), "units")
    return None


# ----------------------------------------------------------------------------------------- loading


def _located(err: ValidationError, index: LocationIndex, origin: str) -> PricesFileError:
    problems = []
    for item in err.errors()[:5]:
        path = tuple(part for part in item["loc"] if isinstance(part, str | int))
        where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")
        position = index.position(path)
        line = f" (line {position[0]})" if position else ""
        problems.append(f"{where or 'the file'}{line}: {item['msg']}")
    return PricesFileError(f"{origin}: not a price catalog: " + "; ".join(problems))


def parse_catalog_text(text: str, origin: str) -> CatalogFile:
    data, index = _read_catalog_yaml(text, origin)
    return _validated_catalog(data, index, origin)


def _read_catalog_yaml(text: str, origin: str) -> tuple[Any, LocationIndex]:
    try:
        return load_yaml(text, origin)
    except SpecError as err:
        where = [
            f"line {p.line}, column {p.column}: {p.message}" if p.line else p.message for p in err.problems
        ]
        raise PricesFileError(f"{origin}: not a readable price catalog: " + "; ".join(where)) from None


def _validated_catalog(data: Any, index: LocationIndex, origin: str) -> CatalogFile:
    if not isinstance(data, dict):
        raise PricesFileError(f"{origin}: a price catalog is a mapping (format, compute, units, ...)")
    try:
        return CatalogFile.model_validate(data)
    except ValidationError as err:
        raise _located(err, index, origin) from None


def builtin_layer() -> Layer:
    text = resources.files("npa_pulumi.plan").joinpath("price_catalog.yaml").read_text(encoding="utf-8")
    return Layer(BUILTIN_ORIGIN, _builtin_catalog(text))


def _builtin_catalog(text: str) -> CatalogFile:
    """The shipped catalog, its YAML read once per content: the line-keeping YAML reader costs ~0.1 s of
    CPU in every command that prices anything (status, preview, up), and the shipped file changes only
    with a release. The cache holds the YAML's data as read (JSON, key order kept), so what is validated
    is exactly what the YAML said."""
    key = disk_cache.cache_key("price-catalog", text)
    cached = disk_cache.load("price-catalogs", key)
    if isinstance(cached, str):
        with contextlib.suppress(ValueError, ValidationError):
            return CatalogFile.model_validate(json.loads(cached))
    data, index = _read_catalog_yaml(text, BUILTIN_ORIGIN)
    catalog = _validated_catalog(data, index, BUILTIN_ORIGIN)
    disk_cache.store("price-catalogs", key, json.dumps(data))
    return catalog


def read_prices_file(path: str | Path) -> Layer:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise PricesFileError(f"--prices {path}: cannot be read: {err.strerror or err}") from None
    except UnicodeDecodeError:
        raise PricesFileError(f"--prices {path}: not UTF-8 text") from None
    return Layer(str(path), parse_catalog_text(text, str(path)))


def load_catalog(prices: str | Path | None = None) -> PriceCatalog:
    """The catalog in use: `prices` (the --prices file), else $NPA_PRICES, layered over the shipped one."""
    chosen = prices or os.environ.get(PRICES_ENV) or None
    builtin = builtin_layer()
    if not chosen:
        return PriceCatalog((builtin,))
    user = read_prices_file(chosen)
    if user.file.mode is CatalogMode.REPLACE:
        return PriceCatalog((user,))
    return PriceCatalog((user, builtin))


def catalog_document(catalog: PriceCatalog) -> dict[str, Any]:
    """Every layer's entries as JSON (`npa-pulumi prices --output json`)."""
    return {
        **catalog.describe(),
        "files": [
            {"origin": layer.origin, **_numbers(layer.file.model_dump(exclude_none=True))}
            for layer in catalog.layers
        ],
    }


def _numbers(value: Any) -> Any:
    """A dump with Decimals as JSON numbers and enums as their values."""
    if isinstance(value, dict):
        return {str(k): _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, StrEnum):
        return value.value
    return value
