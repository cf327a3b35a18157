"""Models beside the bundled one: hub ids resolved from the local Hugging Face cache, offline
(:mod:`~rldata.models.hub`), and the Qwen2-architecture fixture made on the spot
(:mod:`~rldata.models.fixture`)."""
