mod fixtures;
mod metrics;
mod propagation;
mod scaffold;
mod transport;
