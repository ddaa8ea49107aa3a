"""What a check produces: the records the reporters read, the whole-model result."""
