"""Uniform access to the inputs and internals of built-in, Hugging Face and user models."""
