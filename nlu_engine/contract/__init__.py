"""The contract every component builds on: messages, training data, the component base classes,
errors, and the small utilities below them. Nothing here imports a component or the assembly."""
