"""Model implementations (plain ``torch.nn`` modules, their configs and checkpoint adapters)."""
