"""The secrets provider new stacks are created with (`--secrets-provider`, $NPA_SECRETS_PROVIDER): the
passphrase by default, the engine's key-service URLs when chosen, anything else refused with what is valid."""

from __future__ import annotations

import pytest

from npa_pulumi.engine.automation.workspace import SECRETS_PROVIDER_ENV, resolve_secrets_provider
from npa_pulumi.errors import UserInputError

KMS = "awskms://1234abcd-12ab-34cd-56ef-1234567890ab?region=eu-north1&endpoint=https://kms.example"


def test_the_passphrase_unless_one_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRETS_PROVIDER_ENV, raising=False)
    assert resolve_secrets_provider() == "passphrase"
    monkeypatch.setenv(SECRETS_PROVIDER_ENV, KMS)
    assert resolve_secrets_provider() == KMS
    assert resolve_secrets_provider("passphrase") == "passphrase"  # the flag wins over the environment


@pytest.mark.parametrize(
    "url", ["gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/k", "hashivault://fleet"]
)
def test_every_key_service_the_engine_offers(url: str) -> None:
    assert resolve_secrets_provider(url) == url


@pytest.mark.parametrize("url", ["vault://fleet", "kms", "default", "file:///tmp/key"])
def test_anything_else_is_refused_naming_what_is_valid(url: str) -> None:
    with pytest.raises(UserInputError, match=r"'passphrase' or a key service URL \(awskms://"):
        resolve_secrets_provider(url)
