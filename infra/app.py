#!/usr/bin/env python3
"""CDK entry point (see cdk.json): `npx cdk synth` / `npx cdk deploy` from the repo root."""

from shepherd_infra.application import build_app

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
