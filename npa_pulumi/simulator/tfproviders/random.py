"""hashicorp/random (as pinned) on the local cloud: `random_string` and `random_password`, as documented
them (docs/resources/string.md, password.md). Every argument forces a new resource, so a value only ever
changes through replacement (a new `keepers` map, say); import takes the value itself.

Nothing here needs the cloud: the values come from the operating system's CSPRNG, as the real provider's
do (crypto/rand)."""

from __future__ import annotations

import secrets
import warnings
from dataclasses import dataclass
from typing import Any

from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, ProviderHandlers, State

LOWER = "abcdefghijklmnopqrstuvwxyz"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
NUMERIC = "0123456789"
SPECIAL = "!@#$%&*()-_=+[]{}<>:?"  # the provider's default special characters


@dataclass(frozen=True)
class Rules:
    """The documented arguments with their defaults filled: every class on, no minimums."""

    length: int
    lower: bool = True
    upper: bool = True
    numeric: bool = True
    special: bool = True
    min_lower: int = 0
    min_upper: int = 0
    min_numeric: int = 0
    min_special: int = 0
    override_special: str | None = None

    @property
    def specials(self) -> str:
        return SPECIAL if self.override_special is None else self.override_special


def _flag(state: State, name: str, default: bool) -> bool:
    value = state.get(name)
    return default if value is None else bool(value)


def _count(state: State, name: str) -> int:
    value = state.get(name)
    return 0 if value is None else int(value)


def rules_of(planned: State) -> Rules:
    if planned.get("length") is None:
        raise ProviderError("length is required", "set `length` to the number of characters (at least 1)")
    # `number` is the deprecated spelling of `numeric`: either turns digits off.
    numeric = _flag(planned, "numeric", True) and _flag(planned, "number", True)
    rules = Rules(
        length=int(planned["length"]),
        lower=_flag(planned, "lower", True),
        upper=_flag(planned, "upper", True),
        numeric=numeric,
        special=_flag(planned, "special", True),
        min_lower=_count(planned, "min_lower"),
        min_upper=_count(planned, "min_upper"),
        min_numeric=_count(planned, "min_numeric"),
        min_special=_count(planned, "min_special"),
        override_special=planned.get("override_special"),
    )
    minimums = rules.min_lower + rules.min_upper + rules.min_numeric + rules.min_special
    if rules.length < 1:
        raise ProviderError("Invalid Attribute Value", f"length must be at least 1, got {rules.length}")
    if rules.length < minimums:
        raise ProviderError(
            "Invalid Attribute Value",
            f"Attribute length ({rules.length}) must be >= to the sum of min_upper + min_lower + "
            f"min_numeric + min_special ({minimums})",
        )
    return rules


def generate(rules: Rules) -> str:
    """The provider's algorithm: each class's minimum first, the rest from every enabled class, then a
    shuffle, so the minimums sit anywhere."""
    classes = [
        (rules.lower, LOWER, rules.min_lower),
        (rules.upper, UPPER, rules.min_upper),
        (rules.numeric, NUMERIC, rules.min_numeric),
        (rules.special, rules.specials, rules.min_special),
    ]
    alphabet = "".join(chars for enabled, chars, _ in classes if enabled)
    if not alphabet:
        raise ProviderError(
            "Invalid Attribute Combination", "lower, upper, numeric and special are all false"
        )
    # As the provider does, a minimum counts even for a class that is off.
    chosen = [secrets.choice(chars) for _enabled, chars, minimum in classes if chars for _i in range(minimum)]
    chosen += [secrets.choice(alphabet) for _ in range(rules.length - len(chosen))]
    for i in range(len(chosen) - 1, 0, -1):  # Fisher-Yates with the CSPRNG
        j = secrets.randbelow(i + 1)
        chosen[i], chosen[j] = chosen[j], chosen[i]
    return "".join(chosen)


def _bcrypt(value: str) -> str:
    """random_password's `bcrypt_hash`: the libc's bcrypt ($2b$, cost 10 as the provider's default)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt  # the standard library's libc binding (bcrypt through libxcrypt)
        except ImportError:  # Python 3.13 removed it: the hash is then not offered
            return ""
        hashed = crypt.crypt(value, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1 << 10))
    return hashed or ""


def _state(planned: State, rules: Rules, result: str, password: bool) -> State:
    state: dict[str, Any] = dict(planned)
    state.update(
        length=rules.length,
        lower=rules.lower,
        upper=rules.upper,
        numeric=rules.numeric,
        number=rules.numeric,
        special=rules.special,
        min_lower=rules.min_lower,
        min_upper=rules.min_upper,
        min_numeric=rules.min_numeric,
        min_special=rules.min_special,
        result=result,
        # random_string's id is its value; a password's is "none", so the secret is not its address
        id="none" if password else result,
    )
    if password:
        state["bcrypt_hash"] = _bcrypt(result)
    return state


class RandomValue:
    """random_string (password False) or random_password (True)."""

    def __init__(self, password: bool) -> None:
        self.password = password

    def create(self, ctx: CallContext, planned: State) -> State:
        rules = rules_of(planned)
        return _state(planned, rules, generate(rules), self.password)

    def read(self, ctx: CallContext, state: State) -> State | None:
        return state  # nothing outside Terraform's state holds it

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        # Every argument forces replacement: an update only ever carries the same arguments.
        return {**planned, **{k: prior[k] for k in ("result", "id", "bcrypt_hash") if k in prior}}

    def delete(self, ctx: CallContext, state: State) -> None:
        return None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        if not import_id:
            raise ProviderError("Invalid import id", "import a random value by the value itself")
        rules = Rules(length=len(import_id))
        return _state({"keepers": None, "override_special": None}, rules, import_id, self.password)


HANDLERS = ProviderHandlers(
    resources={"random_string": RandomValue(password=False), "random_password": RandomValue(password=True)}
)
