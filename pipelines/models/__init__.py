"""Local model files: materialising the offline default models into ``models/base/``."""
