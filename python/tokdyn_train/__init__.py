"""tokdyn_train: PyTorch training stacks for tokdyn's experiments (the models in PyTorch, equal to
tokdyn's depth maps, and command-line training runs that tokdyn's presets spawn)."""
