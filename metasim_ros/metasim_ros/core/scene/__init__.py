"""The scene: loading MJCF/URDF into a model, finding its models, and its cameras."""
