"""Test and benchmark support that is not part of the product (the simulated inference server)."""
