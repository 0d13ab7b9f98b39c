"""Config: Hydra compose from conf/ (+ a user's file), then resolution into a plan input."""

from envmatrix.config.compose import CONF_DIR, compose_config, resolve_conf_file

__all__ = ["CONF_DIR", "compose_config", "resolve_conf_file"]
