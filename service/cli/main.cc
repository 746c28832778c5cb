// evoscale: the command-line client of evoscaled. See service/cli/cli.h.

#include <iostream>

#include "service/cli/cli.h"

int main(int argc, char** argv) { return evoscale::cli::Main(argc, argv, std::cout, std::cerr); }
