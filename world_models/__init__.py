"""Object-centric world models (COMET-style) and tree search: slots in, MCTS plans out."""
