//! The bugs the model found, each as the shrunk sequence of ops that showed it.
