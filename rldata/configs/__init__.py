"""Configs: every parameter declared once, as a field.

- :mod:`~rldata.configs.fields`: ``param()`` / ``nested()`` field declarations, their checks, and the
  loading of YAML/TOML config files: what every config class is built from;
- :mod:`~rldata.configs.sampling`: the sampling parameters (:class:`SamplingSpec`), the engine settings
  and ``rldata sample``'s config;
- :mod:`~rldata.configs.select`: the configs of ``rldata filter`` and ``rldata stratify``;
- :mod:`~rldata.configs.yaml_safe`: the one bounded YAML loader every command uses.
"""
