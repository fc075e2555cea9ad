mod fixtures;
mod propagation;
mod scaffold;
