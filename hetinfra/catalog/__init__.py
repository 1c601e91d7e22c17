"""Built-in catalogs: GPU hardware facts and LLM architectures."""
