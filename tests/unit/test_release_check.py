"""The release check of the pinned Powertools layer's SSM parameter: it names the regions where
a deploy would fail, and the regions the README must stop listing. SSM is faked (a region's
published names), as moto refuses to hold parameters under /aws/."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
import release_check
from botocore.exceptions import ClientError
from release_check import COMMERCIAL_REGIONS, KNOWN_WITHOUT, check, main
from shepherd_infra import config

NAME = "/aws/service/powertools/python/arm64/python3.14/3.37.0"


class FakeSsm:
    """One region's SSM: the public parameters it holds."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def get_parameter(self, Name: str) -> dict[str, Any]:  # noqa: N803 - boto3's keyword
        if Name not in self.names:
            raise ClientError({"Error": {"Code": "ParameterNotFound"}}, "GetParameter")
        return {"Parameter": {"Name": Name, "Value": "arn:aws:lambda:...:layer:x:1"}}


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """The parameter as Powertools publishes it: every commercial region but four."""
    regions = {r: (set() if r in KNOWN_WITHOUT else {NAME}) for r in COMMERCIAL_REGIONS}
    monkeypatch.setattr(
        boto3, "client", lambda _service, region_name: FakeSsm(regions[region_name])
    )
    return regions


def test_the_pinned_release_is_what_the_stack_reads() -> None:
    assert release_check.__doc__ and "arm64/python3.14" in release_check.__doc__
    name = config.powertools_parameter_name(
        config.RUNTIME, config.ARCHITECTURE, config.POWERTOOLS_VERSION
    )
    assert name == NAME


def test_a_release_published_everywhere_promised_passes(published: dict[str, set[str]]) -> None:
    report = check(NAME, COMMERCIAL_REGIONS, lambda r: FakeSsm(published[r]))
    assert set(report.missing) == set(KNOWN_WITHOUT)
    assert report.blocking == () and report.newly_published == ()
    assert main([config.POWERTOOLS_VERSION]) == 0


def test_a_region_without_the_parameter_blocks_the_release(
    published: dict[str, set[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    published["eu-west-1"].clear()
    assert main([config.POWERTOOLS_VERSION]) == 1
    out = capsys.readouterr().out
    assert "MISSING in eu-west-1" in out and "Do not pin 3.37.0" in out


def test_a_region_that_now_publishes_it_is_reported(
    published: dict[str, set[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    published["me-south-1"].add(NAME)
    assert main([config.POWERTOOLS_VERSION]) == 0
    assert "me-south-1: now published" in capsys.readouterr().out


def test_the_readme_lists_the_regions_without_it() -> None:
    readme = (config.REPO_ROOT / "README.md").read_text()
    for region in KNOWN_WITHOUT:
        assert f"`{region}`" in readme, region
