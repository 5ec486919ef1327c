"""The MetaSim state on MuJoCo: schema, joint targets, reading, writing, joints, frames."""
