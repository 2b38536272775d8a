// Tokenizer tests.
#include <doctest/doctest.h>
