"""What the report predicts before it is served: acceptance, the next lever, the k schedule."""
