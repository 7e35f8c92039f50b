// Boost.Asio (with its SSL streams) and Boost.Beast compiled once, for every target that
// includes them: the library remex_asio defines BOOST_ASIO_SEPARATE_COMPILATION and
// BOOST_BEAST_SEPARATE_COMPILATION for its users, whose objects then declare the
// libraries' non-template functions instead of compiling them again (Boost.Asio's
// "separate compilation" mode). Only the templates each file uses are instantiated there.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
