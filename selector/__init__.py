"""attn-select: validate and select attention backends of LLM serving engines."""
