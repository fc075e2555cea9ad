mod fixtures;
mod metrics;
mod principals;
mod propagation;
mod scaffold;
mod transport;
