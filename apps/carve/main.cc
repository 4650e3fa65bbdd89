#include <iostream>

int main() {
  std::cout << "carve\n";
  return 0;
}
