"""Running the simulation: the handler (the one door to MjData) and the physics loop."""
