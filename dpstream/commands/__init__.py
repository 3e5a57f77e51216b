"""Sub-commands of the ``dpstream`` console command, one module per command group."""
