"""The package's version, in the bottom layer so that any layer can read it (the CLI's
``--version``, the run summary, the servers' metadata); ``agentunit_gym.__version__`` is the same."""

__version__ = "0.1.0"
