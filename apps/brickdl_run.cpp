#include <iostream>

int main() {
  std::cerr << "brickdl-run: not built yet\n";
  return 1;
}
