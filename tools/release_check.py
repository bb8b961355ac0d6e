"""Release check: the public SSM parameter of the pinned Powertools layer exists in every region
the README promises (`make powertools-layer-check`, with credentials for any account; read-only).

The stack reads the layer's ARN at deploy time from
`/aws/service/powertools/python/arm64/python3.14/<version>`. Powertools publishes it per release
and region, and a release has shipped without it (powertools-lambda-python issue 7689), so
before pinning a new version this asks each region. Regions where Powertools publishes no
parameter at all are listed in the README (`-c powertools_layer_arn` there).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# Commercial regions (2026). Where the parameter is missing for every release: Powertools'
# parameter workflow (update_ssm.yml) does not write there. The README lists them.
COMMERCIAL_REGIONS = (
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2",
    "ap-northeast-3", "ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2",
    "ap-southeast-3", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7",
    "ca-central-1", "ca-west-1", "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1",
    "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1", "me-central-1",
    "me-south-1", "mx-central-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1",
    "us-west-2",
)  # fmt: skip
KNOWN_WITHOUT = ("ap-east-2", "ap-southeast-6", "me-central-1", "me-south-1")


@dataclass(frozen=True)
class Report:
    found: tuple[str, ...]
    missing: tuple[str, ...]  # ParameterNotFound
    unreachable: dict[str, str]  # region -> why (not enabled in this account, ...)

    @property
    def blocking(self) -> tuple[str, ...]:
        """Regions the README promises where the parameter is missing: do not release."""
        return tuple(r for r in self.missing if r not in KNOWN_WITHOUT)

    @property
    def newly_published(self) -> tuple[str, ...]:
        """Regions listed as without it that now have it: update the README."""
        return tuple(r for r in self.found if r in KNOWN_WITHOUT)


def check(name: str, regions: Iterable[str], client: Callable[[str], Any]) -> Report:
    """Ask each region for parameter `name` (`client(region)` makes an SSM client)."""
    from botocore.exceptions import BotoCoreError, ClientError

    found, missing, unreachable = [], [], {}
    for region in regions:
        try:
            client(region).get_parameter(Name=name)
            found.append(region)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ParameterNotFound":
                missing.append(region)
            else:
                unreachable[region] = code or str(exc)
        except BotoCoreError as exc:
            unreachable[region] = str(exc)
    return Report(tuple(found), tuple(missing), unreachable)


def main(argv: list[str] | None = None) -> int:
    import boto3
    from shepherd_infra import config

    version = (argv or sys.argv[1:] or [config.POWERTOOLS_VERSION])[0]
    name = config.powertools_parameter_name(config.RUNTIME, config.ARCHITECTURE, version)
    report = check(name, COMMERCIAL_REGIONS, lambda r: boto3.client("ssm", region_name=r))
    print(f"{name}: found in {len(report.found)} regions")
    for region, why in sorted(report.unreachable.items()):
        print(f"  {region}: not asked ({why}: a region not enabled in this account?)")
    for region in report.newly_published:
        print(f"  {region}: now published: take it out of the README's list of regions without it")
    if report.blocking:
        print(
            f"MISSING in {', '.join(report.blocking)}: a deploy there would fail. Do not pin "
            f"{version}: keep the previous release, or wait for Powertools to publish it"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
