"""Which definitions and agents the developer tools run: the project's `[tool.shepherd]`, read
by `shepherd.project` (the one reader the CDK app and `shepherd.testing` share)."""

from shepherd.project import DEFAULT_DEFINITIONS, Project, ProjectError

__all__ = ["DEFAULT_DEFINITIONS", "Project", "ProjectError"]
