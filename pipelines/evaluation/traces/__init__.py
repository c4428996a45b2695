"""The static trace browser and each sample's story."""
