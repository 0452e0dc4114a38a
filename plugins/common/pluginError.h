/*
 * Loud checks for the plugin glue. PLUGIN_CHECK throws PluginError with the failed condition, a message and
 * file:line; every TensorRT entry point (all noexcept) catches it, logs it through TensorRT's logger and
 * returns its failure value (nullptr, -1, false...). TensorRT-free.
 */
#ifndef EDGEATTN_COMMON_PLUGIN_ERROR_H
#define EDGEATTN_COMMON_PLUGIN_ERROR_H

#include <sstream>
#include <stdexcept>
#include <string>

namespace edgeattn
{

class PluginError : public std::runtime_error
{
public:
    explicit PluginError(std::string const& message)
        : std::runtime_error(message)
    {
    }
};

namespace detail
{
[[noreturn]] inline void throwPluginError(char const* condition, std::string const& message, char const* file, int line)
{
    std::ostringstream text;
    text << message << " [check `" << condition << "` failed at " << file << ":" << line << "]";
    throw PluginError(text.str());
}
} // namespace detail

} // namespace edgeattn

//! Throws edgeattn::PluginError unless `condition`; `message` is a stream expression: PLUGIN_CHECK(x > 0, "x=" << x).
#define PLUGIN_CHECK(condition, message)                                                                           \
    do                                                                                                             \
    {                                                                                                              \
        if (!(condition))                                                                                          \
        {                                                                                                          \
            std::ostringstream edgeattnMessage_;                                                                   \
            edgeattnMessage_ << message;                                                                           \
            ::edgeattn::detail::throwPluginError(#condition, edgeattnMessage_.str(), __FILE__, __LINE__);         \
        }                                                                                                          \
    } while (0)

#endif // EDGEATTN_COMMON_PLUGIN_ERROR_H
