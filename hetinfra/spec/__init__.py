"""The service spec: what the user asks for (pydantic models), loaded from YAML with located errors."""
