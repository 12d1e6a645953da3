"""A one-module package for the mutation runner's tests."""
