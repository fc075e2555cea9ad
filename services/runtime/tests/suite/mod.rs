mod fixtures;
mod propagation;
mod scaffold;
mod transport;
