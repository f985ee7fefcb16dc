from nem.cli.lit_config import configure
configure(config)
