#include <iostream>

int main() {
  std::cerr << "brickdl-tune: not built yet\n";
  return 1;
}
